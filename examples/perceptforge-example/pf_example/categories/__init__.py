"""MVP category files of the example (one YAML file per category)."""
