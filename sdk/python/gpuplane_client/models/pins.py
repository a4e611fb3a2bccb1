from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.offload import Offload
from ..models.recompute import Recompute
from ..types import UNSET, Unset

T = TypeVar("T", bound="Pins")


@_attrs_define
class Pins:
    """Optional pins: a `Some` fixes that knob, `None` lets the search choose.

    Attributes:
        cp (int | None | Unset): Context-parallel degree (ring attention over the sequence).
        dp (int | None | Unset):
        ep (int | None | Unset): Expert-parallel degree (MoE models).
        etp (int | None | Unset): Expert tensor-parallel degree (MoE models; Megatron's `--expert-tensor-parallel-
            size`):
            `tp` (Megatron's default: each expert split like the dense layers, EP carved out of the
            `dp * cp` ranks) or 1 (experts whole, EP carved out of the `tp * dp * cp` ranks).
        micro_batch (int | None | Unset):
        offload (None | Offload | Unset):
        pp (int | None | Unset):
        recompute (None | Recompute | Unset):
        sequence_parallel (bool | None | Unset):
        tp (int | None | Unset):
        vp (int | None | Unset):
        zero_stage (int | None | Unset): ZeRO stage: 0 (none) to 3 (parameters sharded too).
    """

    cp: int | None | Unset = UNSET
    dp: int | None | Unset = UNSET
    ep: int | None | Unset = UNSET
    etp: int | None | Unset = UNSET
    micro_batch: int | None | Unset = UNSET
    offload: None | Offload | Unset = UNSET
    pp: int | None | Unset = UNSET
    recompute: None | Recompute | Unset = UNSET
    sequence_parallel: bool | None | Unset = UNSET
    tp: int | None | Unset = UNSET
    vp: int | None | Unset = UNSET
    zero_stage: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        cp: int | None | Unset
        if isinstance(self.cp, Unset):
            cp = UNSET
        else:
            cp = self.cp

        dp: int | None | Unset
        if isinstance(self.dp, Unset):
            dp = UNSET
        else:
            dp = self.dp

        ep: int | None | Unset
        if isinstance(self.ep, Unset):
            ep = UNSET
        else:
            ep = self.ep

        etp: int | None | Unset
        if isinstance(self.etp, Unset):
            etp = UNSET
        else:
            etp = self.etp

        micro_batch: int | None | Unset
        if isinstance(self.micro_batch, Unset):
            micro_batch = UNSET
        else:
            micro_batch = self.micro_batch

        offload: None | str | Unset
        if isinstance(self.offload, Unset):
            offload = UNSET
        elif isinstance(self.offload, Offload):
            offload = self.offload.value
        else:
            offload = self.offload

        pp: int | None | Unset
        if isinstance(self.pp, Unset):
            pp = UNSET
        else:
            pp = self.pp

        recompute: None | str | Unset
        if isinstance(self.recompute, Unset):
            recompute = UNSET
        elif isinstance(self.recompute, Recompute):
            recompute = self.recompute.value
        else:
            recompute = self.recompute

        sequence_parallel: bool | None | Unset
        if isinstance(self.sequence_parallel, Unset):
            sequence_parallel = UNSET
        else:
            sequence_parallel = self.sequence_parallel

        tp: int | None | Unset
        if isinstance(self.tp, Unset):
            tp = UNSET
        else:
            tp = self.tp

        vp: int | None | Unset
        if isinstance(self.vp, Unset):
            vp = UNSET
        else:
            vp = self.vp

        zero_stage: int | None | Unset
        if isinstance(self.zero_stage, Unset):
            zero_stage = UNSET
        else:
            zero_stage = self.zero_stage

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if cp is not UNSET:
            field_dict["cp"] = cp
        if dp is not UNSET:
            field_dict["dp"] = dp
        if ep is not UNSET:
            field_dict["ep"] = ep
        if etp is not UNSET:
            field_dict["etp"] = etp
        if micro_batch is not UNSET:
            field_dict["micro_batch"] = micro_batch
        if offload is not UNSET:
            field_dict["offload"] = offload
        if pp is not UNSET:
            field_dict["pp"] = pp
        if recompute is not UNSET:
            field_dict["recompute"] = recompute
        if sequence_parallel is not UNSET:
            field_dict["sequence_parallel"] = sequence_parallel
        if tp is not UNSET:
            field_dict["tp"] = tp
        if vp is not UNSET:
            field_dict["vp"] = vp
        if zero_stage is not UNSET:
            field_dict["zero_stage"] = zero_stage

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_cp(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        cp = _parse_cp(d.pop("cp", UNSET))

        def _parse_dp(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        dp = _parse_dp(d.pop("dp", UNSET))

        def _parse_ep(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        ep = _parse_ep(d.pop("ep", UNSET))

        def _parse_etp(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        etp = _parse_etp(d.pop("etp", UNSET))

        def _parse_micro_batch(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        micro_batch = _parse_micro_batch(d.pop("micro_batch", UNSET))

        def _parse_offload(data: object) -> None | Offload | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                offload_type_0 = Offload(data)

                return offload_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Offload | Unset, data)

        offload = _parse_offload(d.pop("offload", UNSET))

        def _parse_pp(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        pp = _parse_pp(d.pop("pp", UNSET))

        def _parse_recompute(data: object) -> None | Recompute | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                recompute_type_0 = Recompute(data)

                return recompute_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Recompute | Unset, data)

        recompute = _parse_recompute(d.pop("recompute", UNSET))

        def _parse_sequence_parallel(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        sequence_parallel = _parse_sequence_parallel(d.pop("sequence_parallel", UNSET))

        def _parse_tp(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        tp = _parse_tp(d.pop("tp", UNSET))

        def _parse_vp(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        vp = _parse_vp(d.pop("vp", UNSET))

        def _parse_zero_stage(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        zero_stage = _parse_zero_stage(d.pop("zero_stage", UNSET))

        pins = cls(
            cp=cp,
            dp=dp,
            ep=ep,
            etp=etp,
            micro_batch=micro_batch,
            offload=offload,
            pp=pp,
            recompute=recompute,
            sequence_parallel=sequence_parallel,
            tp=tp,
            vp=vp,
            zero_stage=zero_stage,
        )

        return pins
