"""Any run's record, whichever kind made it: the kinds' records as one discriminated union on `kind`, for the
readers that do not know the kind beforehand (the report pages, the runs index, the demo's summary). A run.json
written before records said their kind is given the one its spec says (canary.rollout.core.record.legacy_kind)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, TypeAdapter

from canary.rollout.broker.record import BrokerRunRecord
from canary.rollout.client.record import ClientRunRecord
from canary.rollout.core.record import readable
from canary.rollout.migration.record import MigrationRunRecord

AnyRunRecord = Annotated[BrokerRunRecord | ClientRunRecord | MigrationRunRecord, Field(discriminator="kind")]
_ADAPTER: TypeAdapter[AnyRunRecord] = TypeAdapter(AnyRunRecord)


def load_record(data: Mapping[str, Any]) -> BrokerRunRecord | ClientRunRecord | MigrationRunRecord:
    """The record run.json holds, as its kind's model. ValueError (pydantic's ValidationError, every problem named)
    for a schema this version does not read or a record that does not fit its kind."""
    return _ADAPTER.validate_python(readable(data))
