"""Independent references the tests compare against (official tools fetched on first use, never the code under test)."""
