package webhook

import "github.com/crdplane/crdplane/pkg/metrics"

// Batching metrics: how many objects and how many waiting requests one
// coalesced ConversionReview carried, and its round trip.
var (
	reviewObjects = metrics.NewHistogram("converter", "webhook_batch_objects",
		"Objects sent in one coalesced ConversionReview.", metrics.SizeBuckets)
	reviewRequests = metrics.NewHistogram("converter", "webhook_batch_requests",
		"Conversion requests served by one coalesced ConversionReview.", metrics.SizeBuckets)
	reviewDuration = metrics.NewHistogram("converter", "webhook_review_duration_seconds",
		"Round trip of one ConversionReview to the webhook.", nil)
)
