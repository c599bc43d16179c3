"""Evaluation of unirag models: embedding quality on MTEB tasks (``mteb_tasks``) run on local data."""
