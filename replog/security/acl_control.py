"""The controller's decisions on CreateAcls and DeleteAcls (Kafka's AclControlManager): the
records to write and each binding's or filter's answer, over the ACLs replayed so far.

Rules (Kafka 4.4.0):
- CreateAcls: each binding is checked (`acl_bindings.check_new_binding`; a bad one is answered
  with its `InvalidAclError`, the others go on). A binding equal to a stored ACL, or to one
  created earlier in the same request, succeeds without a record; any other gets a new id (from
  the caller's `new_id`, drawn again while it names a stored ACL) and an
  `AccessControlEntryRecord`.
- DeleteAcls: each filter is checked (`check_filter`) and answered with the bindings it
  matches; the `RemoveAccessControlEntryRecord`s of every matched ACL are written together,
  one per ACL however many filters match it, in id order.
- Pure: nothing changes until the records are replayed (`AclIndex.replay`).
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from replog.errors import InvalidAclError
from replog.quorum.metadata.records import (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
)
from replog.security.acl_bindings import (
    AclBinding,
    AclBindingFilter,
    check_filter,
    check_new_binding,
)
from replog.security.acl_index import AclIndex

CreateResult = InvalidAclError | None  # None: created, or already there
DeleteResult = InvalidAclError | list[AclBinding]


def create_acls(
    index: AclIndex, bindings: list[AclBinding], new_id: Callable[[], UUID]
) -> tuple[list[AccessControlEntryRecord], list[CreateResult]]:
    existing = {AclBinding.of(acl) for acl in index.acls()}
    records: list[AccessControlEntryRecord] = []
    results: list[CreateResult] = []
    for binding in bindings:
        try:
            check_new_binding(binding)
        except InvalidAclError as error:
            results.append(error)
            continue
        if binding not in existing:
            existing.add(binding)
            taken = {record.acl_id for record in records}
            acl_id = new_id()
            while index.get(acl_id) is not None or acl_id in taken:
                acl_id = new_id()
            records.append(binding.with_id(acl_id))
        results.append(None)
    return records, results


def delete_acls(
    index: AclIndex, filters: list[AclBindingFilter]
) -> tuple[list[RemoveAccessControlEntryRecord], list[DeleteResult]]:
    removed: set[UUID] = set()
    results: list[DeleteResult] = []
    acls = index.acls()
    for binding_filter in filters:
        try:
            check_filter(binding_filter)
        except InvalidAclError as error:
            results.append(error)
            continue
        matched = [acl for acl in acls if binding_filter.matches(AclBinding.of(acl))]
        removed.update(acl.acl_id for acl in matched)
        results.append([AclBinding.of(acl) for acl in matched])
    return [RemoveAccessControlEntryRecord(acl_id) for acl_id in sorted(removed)], results
