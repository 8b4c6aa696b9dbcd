"""Medical cross-document evidence tracing: one patient's documents -> sections, entities with
assertions, normalised times, one timeline of merged events with relations and conflicts, and
ranked evidence for conclusions. Rule-based and deterministic; the engine is an optional re-ranker.
"""
