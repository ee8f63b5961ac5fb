"""``tpusim claims``: Google's TPU 8 claims against tpusim's figures."""

from __future__ import annotations

import argparse

from tpusim.cli.console import print_json
from tpusim.cli.flags import Subparsers
from tpusim.cli.model_flags import JsonOutput, add_model_flags
from tpusim.cli.network_flags import add_network_flags, given_network


def cmd_claims(args: argparse.Namespace) -> None:
    from tpusim.study.claims import format_claims, vendor_claims

    network = given_network(args)
    claims = vendor_claims() if network is None else vendor_claims(network=network)
    if args.as_json:
        print_json({"claims": claims.to_dict("records")})
    else:
        print(format_claims(claims))


def add_parsers(sub: Subparsers) -> None:
    p = sub.add_parser(
        "claims", help="Google's TPU 8 claims against tpusim's figures (shipped systems)"
    )
    add_model_flags(p, JsonOutput)
    add_network_flags(p, default=None, unset="each claim's own network:")
    p.set_defaults(func=cmd_claims)
