"""Pluggable RS256 signing: the ``Signer`` protocol and the built-in signers.

The client builds both JWTs (the token request's assertion and every request's SCA
token) and hands only the bytes to sign to a `Signer`, so the private key can live
in the process (`KeySigner`, the default and fastest), in the process but off the
event loop (`ThreadPoolSigner`), or in a hardware security module that never lets
it out (`Pkcs11Signer`, optional extra ``pkcs11``).
"""

from ._key import KeySigner
from ._pkcs11 import Pkcs11Signer
from ._protocol import Signer
from ._threads import ThreadPoolSigner

__all__ = ["KeySigner", "Pkcs11Signer", "Signer", "ThreadPoolSigner"]
