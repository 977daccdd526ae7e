// Package policy is Switchyard's routing-policy language: it parses the
// switchyard.dev/v1alpha1 resources from YAML (errors carry the file, line
// and YAML path, with "did you mean" suggestions), checks them alone and
// across resources, compiles them into a Snapshot, and evaluates a
// Snapshot's Program for each request without allocating.
//
// # Semantics
//
// A Program is one GatewayBackend: its policies in order, each applied as
// Route (the default) or Guard. Without a GatewayBackend there is one
// implicit program applying every policy, by name, as Route.
//
// For a request (model, tenant, tags):
//
//  1. Guards. For every Guard policy, its first rule whose matches match
//     the request contributes its exclude filters (each only if its `if`
//     matches) to every step below. A guard whose filter was active and
//     whose onEmpty is Reject turns an empty final result into a policy
//     rejection.
//  2. Route rules, in policy order then rule order; a rule applies when any
//     of its matches entries matches (all keys of an entry must match: model
//     equal, tenant equal, tag carried by the request); no matches means
//     every request. For the first applying rule:
//     consider: the candidates are the backends serving one of its consider
//     models, or the requested model when it lists none (this is how an
//     alias is written); backends marked Unavailable are out;
//     exclude: every filter (then every guard filter) drops the backends
//     matching all its selectors (backend type/names/models/pool and live
//     state predicates), recorded per backend;
//     select: tiers in order; a tier takes the remaining candidates of its
//     type and picks the one minimizing its objective (PredictedTTFT by
//     default; near-ties within 1 ms or 1% keep scan order, which starts at
//     Request.Rotation), or with order the first listed provider/worker set
//     that has a candidate (its lowest predicted TTFT). The first tier that
//     picks decides;
//     onEmpty: when no tier picks, Reject rejects the request (fail closed);
//     Fallback (the default) lets the next applying rule try.
//  3. Default routing, after the last applying rule: the requested model's
//     backends, guard filters applied, lowest predicted TTFT.
//
// A Decision records the rule, tier, objective, guards and each backend's
// verdict (dropped by which filter, lost with which score), for Explain,
// logs and metrics. The same program, request and backends always give the
// same decision.
//
// # Checks
//
// Beyond field syntax and values: a reference to a model or provider
// nobody serves (when the input holds a catalog: at least one worker set
// or provider), an alias that shadows a served model, a rule unreachable
// after one that matches all it matches and rejects (a warning when the
// earlier one falls back), a tier that can never pick (after a tier taking
// everything or every backend of its type, after an unconditional exclude
// of its type, or when nothing of its type serves the rule's models), and
// across the policies of a GatewayBackend the same reachability.
package policy
