// TuttiServer: the house — rooms, groups, queue, timeline and control.
