"""What the broker's group and transaction coordinators share: following the leadership of
their internal topic's partitions (`internal_partitions`) and creating that topic on first use
(`internal_topic_creator`)."""
