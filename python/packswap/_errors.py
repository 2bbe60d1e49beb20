"""The exception packswap.torch raises when an exchange fails (bad input is a ValueError)."""


class Error(RuntimeError):
    """A failure of a distributed exchange: every rank of the batch raises one.

    ``code`` says what went wrong, with the C++ library's names: ``"timeout"`` (a collective or
    the solve did not finish within the Rebalancer's timeout), ``"transport"`` (torch.distributed
    reported a failure, e.g. a peer left), ``"mismatch"`` (ranks disagree on the configuration,
    the gathered metadata or the plan), ``"cancelled"`` (the Rebalancer was closed or failed
    earlier). The message reads ``packswap [<code>]: <what happened>`` and names the rank, batch
    and micro-step.
    """

    def __init__(self, code, message):
        super().__init__(f"packswap [{code}]: {message}")
        self.code = code
