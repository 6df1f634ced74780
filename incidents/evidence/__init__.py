"""Evidence: the metrics around each incident, kept in the database."""
