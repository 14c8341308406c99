"""The backward engine: GraphTask bookkeeping (``_graph_task``), the ready
queue (``_ready_queue``), the per-loop CPU worker that runs awaited backwards
and cooperative calls (``_cpu_worker``, ``_cooperative``, ``_admission``),
the kernel pool, products in row blocks and device workers (``_pool``,
``_row_blocks``, ``_device_workers``), and the
drivers that run a backward awaited or in a blocking call (``_drivers``).
``_traps`` holds the only places the engine awaits."""
