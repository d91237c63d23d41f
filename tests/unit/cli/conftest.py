"""Recorded run folders, good and damaged, for the commands that read them."""

import pytest

from tests.fuzz_corpus import Corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    Corpus(root).runs()
    return root
