"""placeholder replaced below"""
from ..nn.modules.module import Module


class DistributedDataParallel(Module):
    pass
