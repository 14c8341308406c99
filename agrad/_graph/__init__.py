"""The recorded graph: Nodes, Edges, AccumulateGrad, GraphRoot, saved tensors."""
