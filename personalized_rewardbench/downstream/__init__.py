"""Best-of-N downstream validity: generate, score, rubric judge, curves; correlation with the benchmark."""
