"""The selection methods as units, like the filter's rules (udfs/rules.py): each declares once
what the config checks of it, which way its score ranks and what it needs. The config
(jobs/selection/config.py), the job (jobs/selection/job.py) and the methods' code
(jobs/selection/methods.py, one class per unit) all read these, so a new method is a unit
here, a class there and its section in conf/select-defaults.yaml."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MethodUnit:
    name: str  # the method's name: `methods:`, --method, its config section, `selected.method`
    lower_is_better: bool  # its score ranks ascending (a cross-entropy, a perplexity)
    needs_seed: bool = True  # trains on the in-domain seed
    own_cut: bool = False  # selects without top/top_percent (percentile buckets, clusters)
    uses_encoder: bool = False  # `<name>.encoder` names a key of `encoders`
    mono_only: bool = False  # scores a monolingual pool only


UNITS: tuple[MethodUnit, ...] = (
    # DiDi WMT20 after Axelrod et al. 2011: cross-entropy difference, in-domain minus general
    MethodUnit("moore_lewis", lower_is_better=True),
    # HW-TSC WMT news: a fastText classifier's in-domain probability
    MethodUnit("fasttext_domain", lower_is_better=False),
    # ZengHuiMT WMT: mean cosine to the k nearest seed sentences
    MethodUnit("embedding_knn", lower_is_better=False, uses_encoder=True),
    # cc_net: perplexity under a general LM, selected by percentile bucket
    MethodUnit("lm_fluency", lower_is_better=True, needs_seed=False, own_cut=True,
               mono_only=True),
    # After DiDi WMT20 (two clusters of BERT [CLS] vectors): KMeans clusters on sentence
    # embeddings, the seed's clusters selected
    MethodUnit("kmeans_domains", lower_is_better=False, own_cut=True, uses_encoder=True),
    # DiDi WMT20: a fine-tuned BERT classifier's in-domain probability (udfs/domain_bert.py)
    MethodUnit("bert_domain", lower_is_better=False),
)
BY_NAME = {unit.name: unit for unit in UNITS}
METHODS = tuple(BY_NAME)
