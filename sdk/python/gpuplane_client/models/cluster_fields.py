from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.gpu_spec import GpuSpec


T = TypeVar("T", bound="ClusterFields")


@_attrs_define
class ClusterFields:
    """Cluster fields: a catalog key (`gpu`) or a full `gpu_spec`.

    Attributes:
        gpus (int): Total GPUs.
        gpu (None | str | Unset):
        gpu_spec (GpuSpec | None | Unset):
        gpus_per_node (int | None | Unset): GPUs per node (default: min(gpus, 8)).
        host_memory_gb (float | None | Unset): Host (CPU) memory per node, GB, for CPU offload. Default: twice the
            node's GPU memory,
            at least 64 GB.
        inter_node_gbps (float | None | Unset): Inter-node bandwidth per node (all NICs together), Gbit/s. Default 100.
        rdma (bool | None | Unset): RDMA (InfiniBand/RoCE) between nodes; otherwise TCP. Default true.
    """

    gpus: int
    gpu: None | str | Unset = UNSET
    gpu_spec: GpuSpec | None | Unset = UNSET
    gpus_per_node: int | None | Unset = UNSET
    host_memory_gb: float | None | Unset = UNSET
    inter_node_gbps: float | None | Unset = UNSET
    rdma: bool | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.gpu_spec import GpuSpec

        gpus = self.gpus

        gpu: None | str | Unset
        if isinstance(self.gpu, Unset):
            gpu = UNSET
        else:
            gpu = self.gpu

        gpu_spec: dict[str, Any] | None | Unset
        if isinstance(self.gpu_spec, Unset):
            gpu_spec = UNSET
        elif isinstance(self.gpu_spec, GpuSpec):
            gpu_spec = self.gpu_spec.to_dict()
        else:
            gpu_spec = self.gpu_spec

        gpus_per_node: int | None | Unset
        if isinstance(self.gpus_per_node, Unset):
            gpus_per_node = UNSET
        else:
            gpus_per_node = self.gpus_per_node

        host_memory_gb: float | None | Unset
        if isinstance(self.host_memory_gb, Unset):
            host_memory_gb = UNSET
        else:
            host_memory_gb = self.host_memory_gb

        inter_node_gbps: float | None | Unset
        if isinstance(self.inter_node_gbps, Unset):
            inter_node_gbps = UNSET
        else:
            inter_node_gbps = self.inter_node_gbps

        rdma: bool | None | Unset
        if isinstance(self.rdma, Unset):
            rdma = UNSET
        else:
            rdma = self.rdma

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "gpus": gpus,
            }
        )
        if gpu is not UNSET:
            field_dict["gpu"] = gpu
        if gpu_spec is not UNSET:
            field_dict["gpu_spec"] = gpu_spec
        if gpus_per_node is not UNSET:
            field_dict["gpus_per_node"] = gpus_per_node
        if host_memory_gb is not UNSET:
            field_dict["host_memory_gb"] = host_memory_gb
        if inter_node_gbps is not UNSET:
            field_dict["inter_node_gbps"] = inter_node_gbps
        if rdma is not UNSET:
            field_dict["rdma"] = rdma

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.gpu_spec import GpuSpec

        d = dict(src_dict)
        gpus = d.pop("gpus")

        def _parse_gpu(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        gpu = _parse_gpu(d.pop("gpu", UNSET))

        def _parse_gpu_spec(data: object) -> GpuSpec | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                gpu_spec_type_0 = GpuSpec.from_dict(data)

                return gpu_spec_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(GpuSpec | None | Unset, data)

        gpu_spec = _parse_gpu_spec(d.pop("gpu_spec", UNSET))

        def _parse_gpus_per_node(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        gpus_per_node = _parse_gpus_per_node(d.pop("gpus_per_node", UNSET))

        def _parse_host_memory_gb(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        host_memory_gb = _parse_host_memory_gb(d.pop("host_memory_gb", UNSET))

        def _parse_inter_node_gbps(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        inter_node_gbps = _parse_inter_node_gbps(d.pop("inter_node_gbps", UNSET))

        def _parse_rdma(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        rdma = _parse_rdma(d.pop("rdma", UNSET))

        cluster_fields = cls(
            gpus=gpus,
            gpu=gpu,
            gpu_spec=gpu_spec,
            gpus_per_node=gpus_per_node,
            host_memory_gb=host_memory_gb,
            inter_node_gbps=inter_node_gbps,
            rdma=rdma,
        )

        return cluster_fields
