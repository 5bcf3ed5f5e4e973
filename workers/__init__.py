"""Consumer entry points (what ``huey_consumer`` loads)."""
