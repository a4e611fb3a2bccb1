"""Contains all the data models used in inputs/outputs"""

from .add_ssh_key_request import AddSshKeyRequest
from .advice_mix import AdviceMix
from .advice_mix_part import AdviceMixPart
from .advice_option import AdviceOption
from .advice_query import AdviceQuery
from .advice_result import AdviceResult
from .advice_target import AdviceTarget
from .api_key import ApiKey
from .assignment import Assignment
from .assignment_list import AssignmentList
from .assignment_status import AssignmentStatus
from .assignment_status_response import AssignmentStatusResponse
from .attach_volume_request import AttachVolumeRequest
from .attachment import Attachment
from .audit_action import AuditAction
from .audit_event import AuditEvent
from .audit_event_detail import AuditEventDetail
from .audit_event_page import AuditEventPage
from .balance import Balance
from .cached_model import CachedModel
from .cluster_fields import ClusterFields
from .console_session import ConsoleSession
from .create_api_key_request import CreateApiKeyRequest
from .create_job_request import CreateJobRequest
from .create_job_request_env import CreateJobRequestEnv
from .create_job_request_parameters import CreateJobRequestParameters
from .create_job_request_secret_env import CreateJobRequestSecretEnv
from .create_join_token_request import CreateJoinTokenRequest
from .create_lease_request import CreateLeaseRequest
from .create_ledger_entry_request import CreateLedgerEntryRequest
from .create_node_request import CreateNodeRequest
from .create_operator_key_request import CreateOperatorKeyRequest
from .create_pool_price_request import CreatePoolPriceRequest
from .create_pool_request import CreatePoolRequest
from .create_service_key_request import CreateServiceKeyRequest
from .create_tenant_request import CreateTenantRequest
from .create_volume_request import CreateVolumeRequest
from .create_webhook_request import CreateWebhookRequest
from .created_api_key import CreatedApiKey
from .created_join_token import CreatedJoinToken
from .created_service_key import CreatedServiceKey
from .created_webhook_endpoint import CreatedWebhookEndpoint
from .delivery_state import DeliveryState
from .desired import Desired
from .desired_state import DesiredState
from .diffusion_spec import DiffusionSpec
from .entry_kind import EntryKind
from .environment import Environment
from .environment_node import EnvironmentNode
from .environment_spec import EnvironmentSpec
from .environment_state import EnvironmentState
from .environment_status import EnvironmentStatus
from .export_format import ExportFormat
from .extend_lease_request import ExtendLeaseRequest
from .failure_cause import FailureCause
from .field_error import FieldError
from .fleet_pool import FleetPool
from .generate_invoices_request import GenerateInvoicesRequest
from .generation_state import GenerationState
from .get_job_logs_format import GetJobLogsFormat
from .gpu import Gpu
from .gpu_facts import GpuFacts
from .gpu_model import GpuModel
from .gpu_sample import GpuSample
from .gpu_series import GpuSeries
from .gpu_spec import GpuSpec
from .health_status import HealthStatus
from .heartbeat_request import HeartbeatRequest
from .heartbeat_request_launchers_type_0 import HeartbeatRequestLaunchersType0
from .heartbeat_response import HeartbeatResponse
from .hf_config import HfConfig
from .insight import Insight
from .insight_figures import InsightFigures
from .intra_link import IntraLink
from .invoice import Invoice
from .invoice_line import InvoiceLine
from .job import Job
from .job_generation import JobGeneration
from .job_generation_correction_type_0 import JobGenerationCorrectionType0
from .job_generation_healing_type_0 import JobGenerationHealingType0
from .job_generation_measured_type_0 import JobGenerationMeasuredType0
from .job_insights import JobInsights
from .job_log_line import JobLogLine
from .job_log_page import JobLogPage
from .job_node import JobNode
from .job_page import JobPage
from .job_state import JobState
from .job_step import JobStep
from .join_token import JoinToken
from .launch_spec import LaunchSpec
from .launch_spec_env import LaunchSpecEnv
from .lease import Lease
from .lease_event import LeaseEvent
from .lease_event_detail_type_0 import LeaseEventDetailType0
from .lease_gpu import LeaseGpu
from .lease_insights import LeaseInsights
from .lease_network import LeaseNetwork
from .lease_page import LeasePage
from .lease_part import LeasePart
from .lease_part_request import LeasePartRequest
from .lease_peer import LeasePeer
from .lease_state import LeaseState
from .lease_volume import LeaseVolume
from .ledger_entry import LedgerEntry
from .ledger_entry_page import LedgerEntryPage
from .link_kind import LinkKind
from .liveness_hold import LivenessHold
from .log_line import LogLine
from .log_report import LogReport
from .log_report_response import LogReportResponse
from .log_stream import LogStream
from .measured import Measured
from .measured_steps import MeasuredSteps
from .memory_breakdown import MemoryBreakdown
from .mixed_part_use import MixedPartUse
from .mixed_plan import MixedPlan
from .mixed_plan_request import MixedPlanRequest
from .mixed_plan_result import MixedPlanResult
from .mixed_stage import MixedStage
from .model_arch import ModelArch
from .model_ref import ModelRef
from .moe_spec import MoeSpec
from .new_gpu import NewGpu
from .node import Node
from .node_facts import NodeFacts
from .node_facts_launchers_type_0 import NodeFactsLaunchersType0
from .node_launchers_type_0 import NodeLaunchersType0
from .node_lease import NodeLease
from .node_notice import NodeNotice
from .node_page import NodePage
from .node_state import NodeState
from .node_utilization import NodeUtilization
from .offload import Offload
from .pair_latency import PairLatency
from .param_type import ParamType
from .part_progress import PartProgress
from .peer_latency import PeerLatency
from .pins import Pins
from .placement import Placement
from .plan import Plan
from .plan_request import PlanRequest
from .plan_result import PlanResult
from .pool import Pool
from .pool_price import PoolPrice
from .pool_quota import PoolQuota
from .pool_revenue import PoolRevenue
from .pool_sla import PoolSla
from .pool_storage_settings import PoolStorageSettings
from .pool_utilization import PoolUtilization
from .precision import Precision
from .problem import Problem
from .problem_context_type_0 import ProblemContextType0
from .progress import Progress
from .quotas import Quotas
from .recompute import Recompute
from .register_request import RegisterRequest
from .register_response import RegisterResponse
from .replan_request import ReplanRequest
from .reported_state import ReportedState
from .request_stats import RequestStats
from .restart_policy import RestartPolicy
from .restart_request import RestartRequest
from .retune import Retune
from .retune_mode import RetuneMode
from .revenue import Revenue
from .role import Role
from .rotate_api_key_request import RotateApiKeyRequest
from .rotated_api_key import RotatedApiKey
from .serve_request import ServeRequest
from .serve_spec import ServeSpec
from .service import Service
from .service_key import ServiceKey
from .service_page import ServicePage
from .service_row import ServiceRow
from .serving_metrics import ServingMetrics
from .serving_report import ServingReport
from .skipped_pool import SkippedPool
from .spec_file import SpecFile
from .ssh_key import SshKey
from .stage_split import StageSplit
from .start_environment_request import StartEnvironmentRequest
from .state_change import StateChange
from .step_page import StepPage
from .step_view import StepView
from .stop_notice import StopNotice
from .storage_price_request import StoragePriceRequest
from .telemetry import Telemetry
from .telemetry_point import TelemetryPoint
from .template import Template
from .template_param import TemplateParam
from .template_spec import TemplateSpec
from .tenant import Tenant
from .tenant_page import TenantPage
from .tenant_revenue import TenantRevenue
from .tenant_role import TenantRole
from .tenant_status import TenantStatus
from .term import Term
from .terminate_lease_request import TerminateLeaseRequest
from .token_request import TokenRequest
from .token_response import TokenResponse
from .update_lease_request import UpdateLeaseRequest
from .update_pool_request import UpdatePoolRequest
from .update_service_request import UpdateServiceRequest
from .update_tenant_request import UpdateTenantRequest
from .update_volume_request import UpdateVolumeRequest
from .update_webhook_request import UpdateWebhookRequest
from .upload import Upload
from .usage_row import UsageRow
from .volume import Volume
from .volume_action import VolumeAction
from .volume_kind import VolumeKind
from .volume_order import VolumeOrder
from .volume_outcome import VolumeOutcome
from .volume_quotas import VolumeQuotas
from .volume_report import VolumeReport
from .volume_store import VolumeStore
from .webhook_attempt import WebhookAttempt
from .webhook_delivery import WebhookDelivery
from .webhook_delivery_page import WebhookDeliveryPage
from .webhook_endpoint import WebhookEndpoint
from .webhook_endpoint_page import WebhookEndpointPage
from .webhook_event import WebhookEvent
from .webhook_event_data import WebhookEventData
from .webhook_event_page import WebhookEventPage
from .workload_fields import WorkloadFields
from .workload_kind import WorkloadKind

__all__ = (
    "AddSshKeyRequest",
    "AdviceMix",
    "AdviceMixPart",
    "AdviceOption",
    "AdviceQuery",
    "AdviceResult",
    "AdviceTarget",
    "ApiKey",
    "Assignment",
    "AssignmentList",
    "AssignmentStatus",
    "AssignmentStatusResponse",
    "AttachVolumeRequest",
    "Attachment",
    "AuditAction",
    "AuditEvent",
    "AuditEventDetail",
    "AuditEventPage",
    "Balance",
    "CachedModel",
    "ClusterFields",
    "ConsoleSession",
    "CreateApiKeyRequest",
    "CreateJobRequest",
    "CreateJobRequestEnv",
    "CreateJobRequestParameters",
    "CreateJobRequestSecretEnv",
    "CreateJoinTokenRequest",
    "CreateLeaseRequest",
    "CreateLedgerEntryRequest",
    "CreateNodeRequest",
    "CreateOperatorKeyRequest",
    "CreatePoolPriceRequest",
    "CreatePoolRequest",
    "CreateServiceKeyRequest",
    "CreateTenantRequest",
    "CreateVolumeRequest",
    "CreateWebhookRequest",
    "CreatedApiKey",
    "CreatedJoinToken",
    "CreatedServiceKey",
    "CreatedWebhookEndpoint",
    "DeliveryState",
    "Desired",
    "DesiredState",
    "DiffusionSpec",
    "EntryKind",
    "Environment",
    "EnvironmentNode",
    "EnvironmentSpec",
    "EnvironmentState",
    "EnvironmentStatus",
    "ExportFormat",
    "ExtendLeaseRequest",
    "FailureCause",
    "FieldError",
    "FleetPool",
    "GenerateInvoicesRequest",
    "GenerationState",
    "GetJobLogsFormat",
    "Gpu",
    "GpuFacts",
    "GpuModel",
    "GpuSample",
    "GpuSeries",
    "GpuSpec",
    "HealthStatus",
    "HeartbeatRequest",
    "HeartbeatRequestLaunchersType0",
    "HeartbeatResponse",
    "HfConfig",
    "Insight",
    "InsightFigures",
    "IntraLink",
    "Invoice",
    "InvoiceLine",
    "Job",
    "JobGeneration",
    "JobGenerationCorrectionType0",
    "JobGenerationHealingType0",
    "JobGenerationMeasuredType0",
    "JobInsights",
    "JobLogLine",
    "JobLogPage",
    "JobNode",
    "JobPage",
    "JobState",
    "JobStep",
    "JoinToken",
    "LaunchSpec",
    "LaunchSpecEnv",
    "Lease",
    "LeaseEvent",
    "LeaseEventDetailType0",
    "LeaseGpu",
    "LeaseInsights",
    "LeaseNetwork",
    "LeasePage",
    "LeasePart",
    "LeasePartRequest",
    "LeasePeer",
    "LeaseState",
    "LeaseVolume",
    "LedgerEntry",
    "LedgerEntryPage",
    "LinkKind",
    "LivenessHold",
    "LogLine",
    "LogReport",
    "LogReportResponse",
    "LogStream",
    "Measured",
    "MeasuredSteps",
    "MemoryBreakdown",
    "MixedPartUse",
    "MixedPlan",
    "MixedPlanRequest",
    "MixedPlanResult",
    "MixedStage",
    "ModelArch",
    "ModelRef",
    "MoeSpec",
    "NewGpu",
    "Node",
    "NodeFacts",
    "NodeFactsLaunchersType0",
    "NodeLaunchersType0",
    "NodeLease",
    "NodeNotice",
    "NodePage",
    "NodeState",
    "NodeUtilization",
    "Offload",
    "PairLatency",
    "ParamType",
    "PartProgress",
    "PeerLatency",
    "Pins",
    "Placement",
    "Plan",
    "PlanRequest",
    "PlanResult",
    "Pool",
    "PoolPrice",
    "PoolQuota",
    "PoolRevenue",
    "PoolSla",
    "PoolStorageSettings",
    "PoolUtilization",
    "Precision",
    "Problem",
    "ProblemContextType0",
    "Progress",
    "Quotas",
    "Recompute",
    "RegisterRequest",
    "RegisterResponse",
    "ReplanRequest",
    "ReportedState",
    "RequestStats",
    "RestartPolicy",
    "RestartRequest",
    "Retune",
    "RetuneMode",
    "Revenue",
    "Role",
    "RotateApiKeyRequest",
    "RotatedApiKey",
    "ServeRequest",
    "ServeSpec",
    "Service",
    "ServiceKey",
    "ServicePage",
    "ServiceRow",
    "ServingMetrics",
    "ServingReport",
    "SkippedPool",
    "SpecFile",
    "SshKey",
    "StageSplit",
    "StartEnvironmentRequest",
    "StateChange",
    "StepPage",
    "StepView",
    "StopNotice",
    "StoragePriceRequest",
    "Telemetry",
    "TelemetryPoint",
    "Template",
    "TemplateParam",
    "TemplateSpec",
    "Tenant",
    "TenantPage",
    "TenantRevenue",
    "TenantRole",
    "TenantStatus",
    "Term",
    "TerminateLeaseRequest",
    "TokenRequest",
    "TokenResponse",
    "UpdateLeaseRequest",
    "UpdatePoolRequest",
    "UpdateServiceRequest",
    "UpdateTenantRequest",
    "UpdateVolumeRequest",
    "UpdateWebhookRequest",
    "Upload",
    "UsageRow",
    "Volume",
    "VolumeAction",
    "VolumeKind",
    "VolumeOrder",
    "VolumeOutcome",
    "VolumeQuotas",
    "VolumeReport",
    "VolumeStore",
    "WebhookAttempt",
    "WebhookDelivery",
    "WebhookDeliveryPage",
    "WebhookEndpoint",
    "WebhookEndpointPage",
    "WebhookEvent",
    "WebhookEventData",
    "WebhookEventPage",
    "WorkloadFields",
    "WorkloadKind",
)
