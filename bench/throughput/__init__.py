"""Job cost against peers and floors, profiles, and the JVMs the suite starts."""
