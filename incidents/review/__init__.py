"""The weekly reliability review: an ISO week's figures (objectives, incidents, what repeats,
what is ignored, fixes) and the eight weeks before it as trend. Reads only; freezing a week's
figures and mailing the digest are `incidents/services/review.py`."""
