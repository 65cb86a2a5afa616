"""cachescope: shadow-cache analytics for grid storage access logs."""

__version__ = "0.1.0"
