"""Files users already have: Hugging Face ``config.json`` -> :class:`~commcost.workload.transformer.TransformerSpec`
(:mod:`commcost.formats.hf_config`); torchtitan TOML, Megatron-LM arguments, NeMo/Megatron-Bridge YAML and
DeepSpeed JSON <-> a job (:mod:`commcost.formats.jobs`). Standard library only."""
