"""``tpusim claims``: Google's TPU 8 claims against tpusim's figures."""

from __future__ import annotations

import argparse

from tpusim.cli.console import print_json
from tpusim.cli.flags import Subparsers
from tpusim.cli.model_flags import JsonOutput, add_model_flags
from tpusim.cli.network_flags import add_network_flags, given_network
from tpusim.later import Later

#: The study layer's claims (every claim simulated), imported only when the command runs.
_VENDOR_CLAIMS = Later("tpusim.study.claims", "vendor_claims")
_FORMAT_CLAIMS = Later("tpusim.study.claims", "format_claims")


def cmd_claims(args: argparse.Namespace) -> None:
    network = given_network(args)
    claims = _VENDOR_CLAIMS() if network is None else _VENDOR_CLAIMS(network=network)
    if args.as_json:
        print_json({"claims": claims.to_dict("records")})
    else:
        print(_FORMAT_CLAIMS(claims))


def add_parsers(sub: Subparsers) -> None:
    p = sub.add_parser("claims")
    add_model_flags(p, JsonOutput)
    add_network_flags(p, default=None, unset="each claim's own network:")
    p.set_defaults(func=cmd_claims)
