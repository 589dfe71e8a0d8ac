"""Where bytes live: one URL layer over local disks, buckets (gs://, s3://) and web
URLs (`fs`), local files read safely (`local_files`), background uploads, and why a
store failed a request, in words a person can act on (`store_errors`)."""
