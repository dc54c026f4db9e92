"""ApiVersions: computed from the handler registry so that what we advertise is what we serve.

From v3 on it also carries the feature flags (KIP-584) clients read: we support ``transaction.version`` 0 to 2
and finalize the level the broker property ``transaction.version`` names (2 by default, as a new Kafka 4.x
cluster has it). Clients switch to KIP-890 part 2 (no AddPartitionsToTxn, EndTxn v5 with an epoch per
transaction) only where they see level 2 finalized; level 0 is not listed, as Kafka leaves it out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groupstream.broker.handlers import handles
from groupstream.protocol.connection import Request

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

TRANSACTION_VERSION = "transaction.version"
MAX_TRANSACTION_VERSION = 2
# The features never change while a broker runs (one node, levels from its configuration): one epoch.
FINALIZED_FEATURES_EPOCH = 1


@handles("ApiVersions")
def handle_api_versions(broker: Broker, request: Request) -> Any:
    body = broker.api_versions_body(error_code=0)
    if request.version < 3:
        return body
    R = request.api.Response
    level = broker.config.transaction_version
    supported = [R.SupportedFeatureKey(name=TRANSACTION_VERSION, min_version=0, max_version=MAX_TRANSACTION_VERSION)]
    finalized = [R.FinalizedFeatureKey(name=TRANSACTION_VERSION, max_version_level=level, min_version_level=level)]
    return body._replace(supported_features=supported, finalized_features_epoch=FINALIZED_FEATURES_EPOCH,
                         finalized_features=finalized if level > 0 else [])
