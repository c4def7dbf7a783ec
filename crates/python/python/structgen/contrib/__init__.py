"""Integrations with serving engines: `structgen.contrib.vllm` (a vLLM structured-output backend)
and `structgen.contrib.sglang` (an SGLang grammar backend). Each imports its engine lazily."""
