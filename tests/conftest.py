"""Suite-wide: speedrun result copies go to a temporary folder, never into the checkout's runs/."""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _speedrun_results_outside_the_repo(tmp_path_factory: pytest.TempPathFactory):
    import os

    from speedrunner.core.runtime.speedrun import RESULTS_DIR_ENV

    old = os.environ.get(RESULTS_DIR_ENV)
    os.environ[RESULTS_DIR_ENV] = str(tmp_path_factory.mktemp("speedrun-results"))
    yield
    if old is None:
        os.environ.pop(RESULTS_DIR_ENV, None)
    else:
        os.environ[RESULTS_DIR_ENV] = old
