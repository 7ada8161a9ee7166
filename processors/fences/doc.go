// Package fences is the fence catalogue every debouncer instance holds: the
// GeoJSON and protobuf forms of a fence, its geometry (polygons with holes,
// multipolygons, circles), and a concurrent, versioned, spatially indexed
// catalogue.
//
// # Invariants
//
//   - A Catalogue is never half-loaded. [Catalogue.Apply] validates and
//     indexes a whole batch into a new immutable [Snapshot] and publishes it
//     with one atomic pointer swap: the batch applies whole or not at all.
//     The index is copy-on-write: a batch of k changes copies the id shards
//     and grid cells those k fences touch (not O(n)) and shares the rest
//     with older snapshots, which it never modifies; a [Follower] start
//     indexes the whole topic once.
//   - [Snapshot.Near] visits exactly the fences whose box, grown by the
//     margin, holds the point ([Bounds.ContainsPoint]), each once. The
//     index is a stack of uniform lat/lon grids hashed by cell (level 0
//     sized from the median fence, coarser levels for bigger fences), so a
//     lookup reads the one to four cells around the point whatever the
//     number of fences.
//   - Every lookup sees one consistent version. A [Snapshot] never changes
//     after it is published; a reader that holds one sees the same fences,
//     index and [Snapshot.Version] for as long as it holds it, and readers
//     never wait for a writer.
//   - A fence file is accepted or rejected whole. [ParseFeatureCollection]
//     returns either every fence or none, with an error that names each bad
//     feature (index and id) and the problem ([*FenceError] wrapping a
//     sentinel such as [ErrSelfIntersecting]).
//   - Every [Fence] built by this package ([ParseFeatureCollection],
//     [FenceFromProto], [NewPolygonFence], [NewCircleFence], [Demo]) is
//     valid and immutable: treat its geometry slices as read-only.
//
// # Properties
//
// Besides id, name, radius_m and the debounce settings, a fence keeps
// properties.tags and properties.groups (lists of at most [MaxLabels]
// strings of 1 to [MaxLabelBytes] bytes) and every other property as
// [Fence.Metadata], one compact JSON object with sorted keys of at most
// [MaxMetadataBytes]; a fence over the bound fails with
// [ErrMetadataTooLarge], and the file with it. Tags ride on every trigger
// of the fence; groups limit which devices it is measured for
// ([Fence.Applies]).
//
// # Geometry semantics
//
// [Fence.SignedDistance] is positive inside, negative outside, and zero on
// the boundary; the boundary (outer ring and hole edges alike) belongs to
// the fence, so [Fence.Contains] is SignedDistance >= 0. Holes are outside.
// Polygon distances use a local equirectangular projection around the query
// point (1° of latitude = 111,320 m, 1° of longitude = 111,320 m × cos(lat)),
// accurate to well under 1% for fences up to tens of kilometres; circles use
// the haversine distance to the centre. Polygon edges follow the shorter way
// round in longitude, so a fence may cross the antimeridian; a fence may not
// span 180° of longitude or more.
package fences
