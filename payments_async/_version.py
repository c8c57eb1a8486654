"""The package's version, read by the build (hatch) and by the telemetry instruments."""

__version__ = "0.1.0.dev0"
