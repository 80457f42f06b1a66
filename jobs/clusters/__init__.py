"""What the portal asks a cluster profile's cluster on a user's or admin's behalf, over the SSH seam
(`cluster/`, which knows no Django): what a cluster offers (survey), the folder browser of its
storage (browse), and what a target folder holds before Start (folder_check)."""
