// Package backups keeps the cluster's state away from its machines: a
// scheduler, run by the leader alone, writes an authenticated, compressed
// backup to a destination every interval, skips one when nothing was
// applied since the newest backup there, and keeps the newest few; and the
// way back, the newest good backup of a directory or an S3-compatible
// bucket, for "linkraft restore --from" and "linkraft serve --restore-from".
//
// The package knows nothing of Raft: the scheduler asks a Source (the
// cluster's node) for its cluster id, its applied index and a backup, and
// writes to a Store. The destination itself records what the newest
// backup is, in its objects' names (name.go), so a new leader continues
// where the last one stopped; as anyone who may write there can name an
// object so, only the backups the scheduler checked count. DESIGN.md has
// the rules.
//
// S3-compatible storage is reached through aws-sdk-go-v2's s3 client
// (store_s3.go) rather than minio-go: added to linkraft's go.mod, it
// changes no version already pinned and brings modules of one publisher
// only, while minio-go v7 would upgrade three pinned modules and add
// thirteen of nine publishers; and the SDK's own configuration loader
// reads the AWS environment variables and shared credentials file that
// operators already keep, as the AWS tools do.
package backups
