"""Options with fixed choices: the Enums the CLI offers match what the libraries take."""

from __future__ import annotations

from typing import get_args

import pytest

from matching.assign import Method
from matching.params import Balance
from vsr_cli.choices import choice
from vsr_cli.failure import CliUsageError
from vsr_cli.match import Solver


def test_every_solver_the_cli_offers_is_one_matching_takes() -> None:
    assert {s.value for s in Solver} <= set(get_args(Method))


def test_a_choice_is_its_member_and_a_wrong_one_names_the_option() -> None:
    parse = choice(Balance, "--balance")
    assert parse("pair") is Balance.PAIR
    assert parse(Balance.OFF) is Balance.OFF
    with pytest.raises(CliUsageError, match=r"^--balance must be soft, pair or off; got 'x'$"):
        parse("x")
