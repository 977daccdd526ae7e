package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InferenceWorkerSetSpec describes a set of vLLM workers serving one model.
// In Kubernetes the workers are the ready endpoints of Service (found
// through its EndpointSlices); in local mode, or for workers outside the
// cluster, they are listed in Static.
// +kubebuilder:validation:XValidation:rule="has(self.service) || has(self.static)",message="set service (Kubernetes) or static (fixed addresses)"
type InferenceWorkerSetSpec struct {
	// Model is the model name the workers serve (vLLM --served-model-name).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Model string `json:"model"`
	// Pool is the InferencePool the workers belong to.
	// +optional
	Pool string `json:"pool,omitempty"`
	// Service names the (usually headless) Service selecting the worker
	// pods; its EndpointSlices give the worker addresses.
	// +optional
	Service string `json:"service,omitempty"`
	// Selector is reserved: policyd refuses it until it selects worker
	// pods (today the Service's EndpointSlices do).
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Port is the vLLM OpenAI-compatible API port on each pod, unless the
	// Service's EndpointSlices name a port "http", which wins.
	// +kubebuilder:default=8000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`
	// MetricsPath is the Prometheus metrics path on Port.
	// +kubebuilder:default="/metrics"
	// +optional
	MetricsPath string `json:"metricsPath,omitempty"`
	// KVEvents is where the workers publish KV cache events (vLLM
	// --kv-events-config); absent means the workers publish none.
	// +optional
	KVEvents *KVEventsSpec `json:"kvEvents,omitempty"`
	// BlockSize is vLLM's KV block size in tokens.
	// +kubebuilder:default=16
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	// +optional
	BlockSize int32 `json:"blockSize,omitempty"`
	// Static lists worker addresses directly.
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=1024
	Static []StaticWorker `json:"static,omitempty"`
}

// KVEventsSpec is the KV event endpoint of each worker pod.
type KVEventsSpec struct {
	// Port of the ZMQ PUB socket, unless the Service's EndpointSlices
	// name a port "kv-events", which wins.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// ReplayPort of the ZMQ ROUTER socket serving replays; 0 when none. A
	// port "kv-replay" of the Service's EndpointSlices wins.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	// +optional
	ReplayPort int32 `json:"replayPort,omitempty"`
	// Topic the workers publish on; empty means every topic.
	// +optional
	Topic string `json:"topic,omitempty"`
}

// StaticWorker is one worker at a fixed address.
type StaticWorker struct {
	// ID is the endpoint id used in metrics, logs and retry exclusions.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._:/-]+$`
	ID string `json:"id"`
	// URL is the worker's base URL, e.g. http://127.0.0.1:8000.
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url"`
	// KVEventsEndpoint is the worker's ZMQ PUB endpoint, e.g.
	// tcp://127.0.0.1:5557.
	// +optional
	KVEventsEndpoint string `json:"kvEventsEndpoint,omitempty"`
	// KVReplayEndpoint is the worker's ZMQ replay endpoint.
	// +optional
	KVReplayEndpoint string `json:"kvReplayEndpoint,omitempty"`
}

// InferenceWorkerSetStatus is written by policyd.
type InferenceWorkerSetStatus struct {
	Status `json:",inline"`
	// Endpoints is the number of worker addresses in the serving snapshot.
	// +optional
	Endpoints int32 `json:"endpoints,omitempty"`
}

// InferenceWorkerSet is a set of vLLM workers serving one model.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=iws,categories=switchyard
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.spec.model`
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.spec.pool`
// +kubebuilder:printcolumn:name="Endpoints",type=integer,JSONPath=`.status.endpoints`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type InferenceWorkerSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InferenceWorkerSetSpec   `json:"spec"`
	Status InferenceWorkerSetStatus `json:"status,omitempty"`
}

// InferenceWorkerSetList is a list of InferenceWorkerSets.
// +kubebuilder:object:root=true
type InferenceWorkerSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InferenceWorkerSet `json:"items"`
}

// InferencePoolSpec holds the scheduling knobs of a GPU pool.
type InferencePoolSpec struct {
	// ScrapeInterval is reserved: policyd refuses it until routers scrape
	// per pool (today the router's --scrape-interval applies).
	// +optional
	ScrapeInterval *metav1.Duration `json:"scrapeInterval,omitempty"`
	// Predictor is reserved: policyd refuses it until routers take priors
	// per pool (today the router's --prefill-rate-prior and
	// --queue-cost-prior apply).
	// +optional
	Predictor *PredictorSpec `json:"predictor,omitempty"`
	// Saturation is reserved: policyd refuses it until it means something;
	// policies express their own thresholds (queuedPrompts, kvCacheUsage).
	// +optional
	Saturation *SaturationSpec `json:"saturation,omitempty"`
}

// PredictorSpec is the TTFT predictor's prior.
type PredictorSpec struct {
	// PrefillTokensPerSecond is the prior prefill rate of one worker.
	// +kubebuilder:validation:Minimum=1
	// +optional
	PrefillTokensPerSecond float64 `json:"prefillTokensPerSecond,omitempty"`
	// SecondsPerQueuedRequest is the prior wait per request ahead.
	// +kubebuilder:validation:Minimum=0
	// +optional
	SecondsPerQueuedRequest float64 `json:"secondsPerQueuedRequest,omitempty"`
}

// SaturationSpec are a pool's saturation thresholds.
type SaturationSpec struct {
	// MaxQueuedPrompts: more waiting requests than this is saturated.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxQueuedPrompts int32 `json:"maxQueuedPrompts,omitempty"`
	// MaxKVCacheUsage: KV cache usage (0..1) at or above this is saturated.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	// +optional
	MaxKVCacheUsage float64 `json:"maxKVCacheUsage,omitempty"`
}

// InferencePool groups worker sets on a pool of GPUs.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ipool,categories=switchyard
// +kubebuilder:printcolumn:name="Scrape",type=string,JSONPath=`.spec.scrapeInterval`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type InferencePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InferencePoolSpec `json:"spec,omitempty"`
	Status Status            `json:"status,omitempty"`
}

// InferencePoolList is a list of InferencePools.
// +kubebuilder:object:root=true
type InferencePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InferencePool `json:"items"`
}
