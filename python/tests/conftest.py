# SPDX-License-Identifier: MIT
"""Fixtures: every test runs once per backend (host, opencl, cuda); a
backend this machine cannot run is skipped with the library's reason."""
from collections.abc import Iterator

import pytest

import kcache

BACKENDS = ["host", "opencl", "cuda"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    ok, why = kcache.backend_available(request.param)
    if not ok:
        pytest.skip(f"{request.param} backend not available here: {why}")
    if request.param == "cuda":
        # NVRTC alone is not enough to launch: a context needs a driver and a device
        try:
            kcache.Runtime(backend="cuda", cache_disable=True).close()
        except kcache.KcacheError as e:
            pytest.skip(f"cuda: {e}")
    return str(request.param)


@pytest.fixture
def rt(backend: str) -> Iterator[kcache.Runtime]:
    with kcache.Runtime(backend=backend, cache_disable=True) as r:
        yield r
