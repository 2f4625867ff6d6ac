"""BLINK-style task files of the example (one YAML file per task, its prompt under prompts/)."""
