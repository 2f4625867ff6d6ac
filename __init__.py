"""perceptforge: build multimodal perception benchmarks and score models on them."""

__version__ = "0.1.0"
