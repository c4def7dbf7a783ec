"""Integrations: `structgen.contrib.vllm` (a vLLM structured-output backend),
`structgen.contrib.sglang` (an SGLang grammar backend) and `structgen.contrib.hf` (a transformers
`LogitsProcessor` for `generate`). Each imports its engine lazily."""
