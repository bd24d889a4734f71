"""What the trace explorer computes, without Textual: per-launch context, search, grouped tables, range totals.

* ``context.launch_context``: per GPU launch, a code into the few distinct op stacks, source
  lines and nn.Module paths around it (built once per trace, vectorised);
* ``search.launch_search``: match a pattern against kernel names, the op stack, the source
  line and the module path of every launch (a keystroke: the distinct values, then one gather);
* ``groups.group_stats``: the kernel table grouped by kernel, launching op, module, source
  line or step, over any mask of launches;
* ``ranges.range_totals``: launches, GPU time, busy time and bytes of a time range.
"""

from kerneltui.analysis.explore.context import LaunchContext, launch_context
from kerneltui.analysis.explore.groups import (
    GROUP_LABEL,
    GROUPINGS,
    GroupIndex,
    available_groupings,
    group_codes,
    group_index,
    group_stats,
    scope_mask,
)
from kerneltui.analysis.explore.ranges import (
    RangeIndex,
    RangeTotals,
    range_index,
    range_totals,
)
from kerneltui.analysis.explore.search import (
    FIELDS,
    LaunchSearch,
    launch_search,
    match_totals,
)

__all__ = [
    "FIELDS",
    "GROUPINGS",
    "GROUP_LABEL",
    "GroupIndex",
    "LaunchContext",
    "LaunchSearch",
    "RangeIndex",
    "RangeTotals",
    "available_groupings",
    "group_codes",
    "group_index",
    "group_stats",
    "launch_context",
    "launch_search",
    "match_totals",
    "range_index",
    "range_totals",
    "scope_mask",
]
