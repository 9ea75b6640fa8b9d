"""On-disk formats: each module writes and reads the bytes of one format."""
