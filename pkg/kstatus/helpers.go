package kstatus

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func typesUID(s string) types.UID { return types.UID(s) }

func schemaGR() schema.GroupResource { return schema.GroupResource{} }
