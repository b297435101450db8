"""The reasoning-graph view (GraphScene renders core.run.reasoning_graph.ReasoningGraph) and its node details."""
