"""The incidents' fixtures, for the route-by-role walk (a real incident to open and act on)."""

from tests.incidents.conftest import incident  # noqa: F401
