"""Consolidation must not cost recall: evidence recall@10 on the LoCoMo dev conversations before and after one
run of every job, on the same store (episodes and facts as the ingestor writes them)."""
from shared.consolidation.run import Consolidation
from shared.evaluation.consolidation import evaluate_consolidation, quiet
from tests.support.plain import LocomoMemory

MAX_DROP = 0.01


async def test_consolidating_locomo_keeps_evidence_recall_at_10(locomo_memory: LocomoMemory) -> None:
    """One run of every consolidation job writes facts for each LoCoMo dev conversation and lowers none of their
    evidence recall@10 by more than 0.01."""
    retrieval = locomo_memory.retrieval
    consolidation = Consolidation(store=retrieval.store, publish=quiet, sparse=retrieval.sparse,
                                  settings=retrieval.settings)
    drops = []
    for sample_id, conversation in locomo_memory.conversations.items():
        result = await evaluate_consolidation(retrieval, consolidation, sample_id, conversation,
                                              before=locomo_memory.scores[sample_id])
        print(f"{sample_id}: all@10 {result.before.overall.all_at_k:.3f} -> {result.after.overall.all_at_k:.3f}; "
              f"active {result.active_before} -> {result.active_after}; {result.summary.model_dump_json()}; "
              f"facts {result.facts_by_attribute}")
        drops.append(result.before.overall.all_at_k - result.after.overall.all_at_k)
        assert sum(result.facts_by_attribute.values()) > 0
    assert max(drops) <= MAX_DROP, drops  # on each conversation
