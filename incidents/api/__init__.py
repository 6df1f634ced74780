"""The REST API of the contract (/api/v1/)."""
