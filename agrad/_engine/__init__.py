"""The backward engine: GraphTask bookkeeping (``_graph_task``), the ready
queue (``_ready_queue``), and the drivers that run it on an event loop or in a
blocking call (``_drivers``).  ``_traps`` holds the only places the engine
awaits."""
