"""Runs torchrun (torch.distributed.run) from Debian 12's python3-torch 1.13 on Python 3.11.

That torchrun fails before it starts a worker: Std.from_str("0"), the default of
--redirects and --tee, returns None, because Python 3.11 no longer lists an IntFlag's
zero and multi-bit members when iterating it. This fixes only that function and then
runs torchrun unchanged, with the same arguments."""
import re
import runpy
import sys

from torch.distributed.elastic.multiprocessing import api


def _from_str(vm):
    if re.match(api._VALUE_REGEX, vm):
        return api.Std(int(vm))
    if re.match(api._MAPPING_REGEX, vm):
        return {int(i): api.Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError(f"{vm} does not match: <{api._VALUE_REGEX}> or <{api._MAPPING_REGEX}>")


api.Std.from_str = staticmethod(_from_str)
sys.argv[0] = "torchrun"
runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
